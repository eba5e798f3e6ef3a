"""What a task is and where it comes from: profiles, mining, the task store, locks, image specs, the project.

Rule: pure data and git. Nothing here imports Docker, `environment/` or `evaluation/` (of `agents/`, only the
model client and the config models). What an image is made of is computed here (`image_spec.py`) and handed
to `environment/` as plain values.
"""
