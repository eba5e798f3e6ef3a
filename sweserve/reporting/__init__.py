"""Summaries, the HTML page and reviewer pages.

Rule: reads only models, errors and results; never runs anything.
"""
