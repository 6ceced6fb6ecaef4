"""The event system: the log, the one emitter and its hooks, the wake-up hub and ``listen()``.

The bottom of the apps (above ``config`` only): it imports no other app of the project, and no
module of it knows another app's payload shape.
"""
