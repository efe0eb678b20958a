"""One module per CLI subcommand; each defines a click command named `command`.

`scalestack.cli` lists this package, so adding a subcommand is adding a module here
(module `foo_bar` becomes `scalestack foo-bar`;
a trailing underscore is dropped, so `import_` is `scalestack import`).
"""
