"""passes/kn"""
