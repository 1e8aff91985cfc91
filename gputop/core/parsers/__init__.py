"""Parsers for what nodes print: pure functions from text to frozen values.

They never raise on odd input: a field that cannot be read becomes None with a note; a hopeless document
becomes a `ParseFailure` the UI and `gputop parse` can show. Each parser module lists its kinds in a
`PARSERS` mapping; `registry()` gathers them.
"""
