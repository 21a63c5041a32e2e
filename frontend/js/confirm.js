// The sign-in confirmation page: its token leaves the address bar and the history (the form still holds it).
history.replaceState(null, "", location.pathname);

// Every page answers with `Referrer-Policy: no-referrer`, under which a form's own post says `Origin: null`,
// and /sign-in refuses that (whom a browser is signed in as is decided on this gateway's pages). A fetch
// keeps its Origin whatever the policy, and sends no Referer: the button posts the form through one.
const form = document.querySelector("form[action='/sign-in']");
const problem = document.getElementById("sign-in-problem");

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const button = form.querySelector("button[type='submit']");
  button.disabled = true;
  problem.hidden = true;
  try {
    const answer = await fetch(form.action, { method: "POST", body: new URLSearchParams(new FormData(form)) });
    if (answer.redirected) {
      location.replace(answer.url); // the app, signed in, or /?signin=expired
      return;
    }
    const refused = await answer.json().catch(() => ({}));
    problem.textContent = refused.message || `Signing in failed (${answer.status}).`;
  } catch {
    problem.textContent = "The gateway did not answer: try again.";
  }
  problem.hidden = false;
  button.disabled = false;
});
