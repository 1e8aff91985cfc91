"""The Textual user interface: observes views, sends action requests."""
