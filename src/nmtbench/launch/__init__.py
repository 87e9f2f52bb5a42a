"""`nmtbench launch`: the stages DVC finds out of date, run as concurrent jobs through submitit and recorded in
dvc.lock as `dvc repro` records them (docs/scaling.md)."""
from nmtbench.launch.scheduler import launch

__all__ = ["launch"]
