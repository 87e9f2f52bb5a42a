"""Keep freed memory for reuse, so a training step does not page-fault its largest tensors in afresh.

glibc's malloc hands allocations above 32 MB (its largest mmap threshold) straight to the kernel and
unmaps them when freed, so every step maps the logits, their fp32 copy and their gradient (tokens x
vocabulary, 65 MB in fp32 at 2,000 tokens and 8,000 subwords) anew and pays a page fault for every 4 KB
page on first touch, which made a cast of such a tensor take several times as long as the same cast
into memory already touched. Turning mmap off for malloc (allocations then come from the heap, which
keeps freed memory) and raising the threshold at which the heap's free top goes back to the kernel
makes later steps reuse the pages, at the price of a process that holds on to its peak memory.
Where the C library has no mallopt (macOS, Windows) nothing changes.
"""
from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
M_MMAP_MAX = -4
KEEP_FREED = 2**31 - 1  # bytes of free heap top kept rather than returned: mallopt takes an int


def reuse_freed_memory() -> bool:
    """Make this process's malloc keep freed memory for reuse; True where the C library lets it."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, KEEP_FREED))
