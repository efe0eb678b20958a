# scalestack: `make demo` records a real program and writes a report; `make test` runs the suite.
# Both start from a fresh clone: they create .venv and install everything themselves.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install system-deps bpf demo test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: install
	$(PY) -m scalestack.commands._demo demo-out

system-deps:
	@bash scripts/system-deps.sh

# the eBPF aggregator (`scalestack top`, `record --aggregate`): built against this kernel's BTF
# (also done on first use; needs root, clang, libbpf-dev, bpftool)
bpf: install
	$(PY) -c "from scalestack.collect.aggregator import build; print(*build(force=True))"

# the tests that neither record nor time the machine run on every core, then the `serial` ones alone
# (tests/conftest.py says which); both parts run, and either failing fails the target
test: install system-deps
	@$(PY) -m pytest -q -p no:cacheprovider -m "not serial" -n auto; a=$$?; \
	$(PY) -m pytest -q -p no:cacheprovider -m serial; b=$$?; \
	test $$a -eq 0 && test $$b -eq 0

lint: install
	$(PY) -m ruff check src tests benchmarks

bench: install
	$(PY) benchmarks/run_all.py --quick

clean:
	rm -rf $(VENV) demo-out build *.egg-info
