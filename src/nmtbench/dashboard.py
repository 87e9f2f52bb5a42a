"""`nmtbench dashboard`: a W&B report comparing the runs of one experiment (the W&B group `wandb.group`).

The runs are logged offline by default; upload them first with `wandb sync wandb/offline-run-*`.
Creating a report needs an API key and the `wandb-workspaces` package (W&B's report API); without
either the command says so in one line and changes nothing.
"""
from __future__ import annotations

from nmtbench.config import WandbConfig


class DashboardError(ValueError):
    """What the dashboard needs and is not there: an API key or the report package."""


NEEDS_KEY = ("needs a W&B account: run `wandb login` (or set WANDB_API_KEY), upload the offline runs with "
             "`wandb sync wandb/offline-run-*`, then run `nmtbench dashboard` again")
NEEDS_PACKAGE = "needs the wandb-workspaces package for W&B's report API: make setup installs it"


def dashboard(cfg: WandbConfig, split: str) -> str:
    """Create a W&B report of the group's runs: learning curves, and BLEU on split against size and speed.

    Returns the report's URL.
    """
    import wandb

    try:
        api = wandb.Api()
    except wandb.errors.UsageError:  # raised when no API key is configured; no network is touched
        raise DashboardError(NEEDS_KEY) from None
    except (wandb.errors.AuthenticationError, wandb.errors.CommError) as error:  # a wrong key, or no network
        raise DashboardError(f"W&B refused the API key or could not be reached ({type(error).__name__}); "
                             f"{NEEDS_KEY}") from None
    try:
        import wandb_workspaces.reports.v2 as wr
    except ImportError:
        raise DashboardError(NEEDS_PACKAGE) from None

    report = build_report(wr, cfg, split, api.default_entity)
    report.save()
    return report.url


def build_report(wr, cfg: WandbConfig, split: str, entity: str):
    """The report itself (wr: wandb_workspaces.reports.v2): one panel grid over the runs of the group."""
    bleu = wr.SummaryMetric(f"{split}/bleu")
    runs = wr.Runset(entity=entity, project=cfg.project, name=f"group {cfg.group}",
                     filters=f"Metric('Group') == '{cfg.group}'")
    panels = [
        wr.LinePlot(title="validation loss", x="Step", y=["val/loss"]),
        wr.LinePlot(title="validation BLEU against tokens seen", x="train/target_tokens", y=["val/bleu"]),
        wr.ScatterPlot(title=f"{split} BLEU against parameters", x=wr.Config("params"), y=bleu, log_x=True),
        wr.ScatterPlot(title=f"{split} BLEU against decoding speed", x=wr.SummaryMetric(f"{split}/sentences_per_s"),
                       y=bleu),
    ]
    return wr.Report(entity=entity, project=cfg.project, title=f"nmtbench: {cfg.group}",
                     description="Training runs (job type train) and test scores with every translation "
                                 "(job type evaluate) of one experiment, tagged by model, family and seed.",
                     blocks=[wr.PanelGrid(runsets=[runs], panels=panels)])
