"""The Python example of docs/LIBRARY.md (the block after `<!-- example: python -->`), run as it is printed,
and its import line."""
import os
import subprocess
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOC = os.path.join(ROOT, "docs", "LIBRARY.md")


def example(marker):
    text = open(DOC).read()
    after = text[text.index(marker) + len(marker):]
    body = after[after.index("```python") + len("```python"):]
    return body[:body.index("\n```")].lstrip("\n")


class TestLibraryDoc(unittest.TestCase):
    def test_the_import_line_of_the_doc_works_from_the_build_tree(self):
        text = open(DOC).read()
        line = "PYTHONPATH=python python3 -c 'import stagecache; print(stagecache.lib_path)'"
        self.assertIn(line, text)
        env = dict(os.environ, PYTHONPATH="python", PYTHONDONTWRITEBYTECODE="1")
        env.pop("STAGECACHE_LIB", None)  # as a user would: found next to the package
        p = subprocess.run([sys.executable, "-c", "import stagecache; print(stagecache.lib_path)"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.strip().endswith("build/libstagecache.so.0"), p.stdout)

    def test_the_doc_example_runs(self):
        code = example("<!-- example: python -->")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertTrue(lines[0].startswith("hit: 65536 bytes, first byte 0, digest "), p.stdout)
        self.assertEqual(lines[1], "hits: 1")


if __name__ == "__main__":
    unittest.main()
