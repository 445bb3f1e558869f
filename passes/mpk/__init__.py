"""Passes from fused kernels to a persistent megakernel's task graph (`mpk` dialect)."""
