"""What tests import: tiny models, tiny data mirrors, scratch projects. Fixtures stay in conftest.py."""
