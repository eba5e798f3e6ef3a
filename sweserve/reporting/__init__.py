"""Summaries, the HTML page and reviewer pages.

Rule: reads only models, errors and results (files through the one loader, `sweserve.loading`); never runs
anything.
"""
