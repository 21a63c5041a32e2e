"""A person in the browser: signing in (session, confirm, auth) and their account."""
