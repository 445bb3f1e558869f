"""passes/conversion"""
