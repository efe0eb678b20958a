"""REPS products of two N x N matrices on NumPy's BLAS threads, a serial step (a sum) between
them. Usage: python blas_products.py N REPS (prints the seconds the products took)."""
import numpy as np, sys, time
n = int(sys.argv[1]); reps = int(sys.argv[2])
a = np.random.rand(n, n); b = np.random.rand(n, n)
t = time.time()
for i in range(reps):
    c = a @ b
    s = float(c.sum())  # a serial step between the parallel products
    a[0, 0] = s * 1e-12
print(time.time() - t)
