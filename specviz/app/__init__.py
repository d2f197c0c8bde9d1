"""The app's support: figure builders, presenter mode, settings in the link, caps, and the logic
behind each page. No Streamlit import here either."""
