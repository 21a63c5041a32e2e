// The view in the address: what is open and what is searched lives in the query string, so a reload or a shared
// link opens the same view. Each view owns its parameters and changes only those (replaceState: typing a search
// adds no history entries).
//
//   jobs=open       the Jobs popover is open         find=<text>   its search
//   panel=<id>      a trajectory's panel is open     tab=analyses  on its Analyses tab
//   q=<text>        the dashboard's (or Submissions page's) search; the Submissions page's own view: sort, dir,
//                   status, project, user, page

/** The parameter's value, or "" when absent. */
export function param(name) {
  return new URLSearchParams(location.search).get(name) || "";
}

/** Set (or, with "" / null, remove) these parameters and keep every other. */
export function setParams(changes) {
  const p = new URLSearchParams(location.search);
  for (const [name, value] of Object.entries(changes)) {
    if (value === "" || value === null || value === undefined) p.delete(name);
    else p.set(name, String(value));
  }
  const qs = p.toString();
  const url = `${location.pathname}${qs ? `?${qs}` : ""}${location.hash}`;
  if (url !== `${location.pathname}${location.search}${location.hash}`) history.replaceState(history.state, "", url);
}
