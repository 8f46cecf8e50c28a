"""The LLM agents: the generation agent (`agent.py`) and the performance analyst
(`analyst.py`), through the providers of `kforge_search.llm`."""
