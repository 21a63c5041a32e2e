"""What every HTTP request passes, whatever its route: who calls and may they (guards), the error it gets
(refusals), the headers, hosts and body bounds, the answers' shapes, and the bounds on heavy reads, actions in
flight and streamed exports."""
