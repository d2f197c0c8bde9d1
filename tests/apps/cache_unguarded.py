"""A negative control for tests/test_serve.py: st.cache_data without app.py's clear_cache guard."""

import streamlit as st


@st.cache_data
def square(x: int) -> int:
    return x * x


st.write(square(7))
