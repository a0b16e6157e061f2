"""The README's Python example (the block after `<!-- example: python -->`), run as it is printed."""
import os
import subprocess
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def example(marker):
    text = open(os.path.join(ROOT, "README.md")).read()
    after = text[text.index(marker) + len(marker):]
    body = after[after.index("```python") + len("```python"):]
    return body[:body.index("\n```")].lstrip("\n")


class TestReadme(unittest.TestCase):
    def test_the_readme_example_runs(self):
        code = example("<!-- example: python -->")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertTrue(lines[0].startswith("hit: 65536 bytes, first byte 0, digest "), p.stdout)
        self.assertEqual(lines[1], "hits: 1")


if __name__ == "__main__":
    unittest.main()
