"""A small Python program traced by hwsim: dict and list churn (interpreter memory behaviour)."""
import random

random.seed(1)
d = {}
for i in range(20000):
    d[random.randrange(50000)] = [i] * (i % 7)
print(sum(len(v) for v in d.values()))
