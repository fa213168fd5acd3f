//! aileron-sandbox
