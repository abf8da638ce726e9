"""Optimizers (``optimizers``: SGD with momentum/Nesterov/weight decay, RMSProp, Adam, Nadam) and
learning-rate schedules (``schedules``: warm-up and step decay, reduce-on-plateau, early stopping)."""

from ardlab.nn.optim.optimizers import OPTIMIZERS, SGD, Adam, Nadam, Optimizer, RMSProp, get
from ardlab.nn.optim.schedules import EarlyStopping, ReduceLROnPlateau, warmup_step_schedule

__all__ = ["OPTIMIZERS", "SGD", "Adam", "EarlyStopping", "Nadam", "Optimizer", "RMSProp", "ReduceLROnPlateau", "get",
           "warmup_step_schedule"]
