"""passes/cute"""
