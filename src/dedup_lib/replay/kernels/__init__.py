"""What walks each key's sends after the sort: a Java function (the default) or Arrow in Python."""
