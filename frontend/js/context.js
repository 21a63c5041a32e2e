// What the views share: the signed-in person, the team's live state, the connection, and a redraw.
import { TeamState } from "./state.js";

export const app = {
  me: null, // /api/me
  teamId: null,
  live: null, // the live connection
  leaving: false, // signing out: no other page (a refused renewal's "session ended") is gone to instead
  team: new TeamState(), // the team channel's state
  memberNames: new Map(), // user id -> name
  clusterNames: new Map(), // the team's clusters: id -> name
  schedule: () => {}, // redraw at the next animation frame
};
