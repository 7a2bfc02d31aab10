"""The Streamlit trace viewer: `app.py` is the page (`streamlit run viewer/app.py -- RUN…`), the other
modules draw its views. The logic they rely on lives in `evalkit.view.support` and its neighbours."""
