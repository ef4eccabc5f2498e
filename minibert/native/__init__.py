"""What talks to the machine below NumPy: OpenBLAS through ctypes (blas) and glibc's malloc settings
(malloc). No imports here: import the modules one by one."""
