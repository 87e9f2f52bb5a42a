"""Training: the shared LightningModule and the train stage."""
