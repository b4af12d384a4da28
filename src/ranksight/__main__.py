from ranksight.cli import entry

entry()
