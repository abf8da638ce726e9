"""Aggregation of tidy result files into tables, tuned selection files, cost models and figures."""
