"""The workflow's side of ardlab: the study configuration (``config``) and each job's command (``commands``)."""
