"""Byte and time units. The engine computes in bytes and seconds throughout."""

KIB = 1024
MIB = 1024**2
GIB = 1024**3
KB = 1000
MB = 1000**2
GB = 1000**3
BITS_PER_BYTE = 8
