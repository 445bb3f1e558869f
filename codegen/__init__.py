"""Code generation: the CUDA printer of cute kernels, launch plans and the device header library."""
