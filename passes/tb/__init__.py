"""passes/tb"""
