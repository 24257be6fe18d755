"""Hosted tools: the tools a Responses request asks the server to run (web search, MCP, code interpreter).

`base` is the interface between the server's tool loop and the backends; `policy` is where every backend may
connect. docs/hosted-tools.md says how to configure them.
"""
