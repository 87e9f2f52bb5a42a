"""Training keeps freed memory for reuse: steps that allocate the same large tensors stop page-faulting."""
import subprocess
import sys

# minor page faults of the last three of ten "steps", each making and freeing tensors above glibc's largest
# mmap threshold (32 MB) among small ones, as a training step does with its logits
STEADY_STATE_FAULTS = """
import resource, sys, torch
from nmtbench.training.allocator import reuse_freed_memory
if sys.argv[1] == "reuse":
    assert reuse_freed_memory()
logits = torch.randn(1100, 8000).bfloat16()  # 35 MB once in fp32
for step in range(10):
    if step == 7:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    small = [torch.ones(100 * i + 7) for i in range(50)]
    gradient = log_probs.exp()
    del log_probs, small, gradient
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def steady_state_faults(mode: str) -> int:
    run = subprocess.run([sys.executable, "-c", STEADY_STATE_FAULTS, mode], capture_output=True, text=True,
                         check=True)
    return int(run.stdout)


def test_large_tensors_freed_by_one_step_are_reused_by_the_next_without_page_faults():
    assert steady_state_faults("default") > 20_000  # every 35 MB tensor mapped anew: 8,600 pages of 4 KB each
    assert steady_state_faults("reuse") < 1_000
