"""The command line: parse, call the library, format. No logic of its own."""
