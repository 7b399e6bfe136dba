"""The application layer (RunService) and the headless search loop."""
