"""The command-line commands in groups, each group a module with its handlers and its add_commands(command)
(cli.py builds the parser from them)."""
