// The sign-in confirmation page: its token leaves the address bar and the history (the form still holds it).
history.replaceState(null, "", location.pathname);
