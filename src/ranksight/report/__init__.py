"""Reporters: terminal tables, files, and the HTML report. They format; they never compute."""
