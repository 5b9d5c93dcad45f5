"""Helpers shared by the tests: plain functions, classes and constants. Fixtures stay in conftest.py files;
test modules import helpers from here, never from another test module or a conftest."""
