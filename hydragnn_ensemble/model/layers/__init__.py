"""One module per message-passing layer family."""
