"""Streamlit's own floor: the smallest app, served with the app's flags by benchmarks/load.py --cpu."""

import streamlit as st

st.write("Hello, world")
