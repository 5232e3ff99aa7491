// The serve banner's sign-in link carries the key in the URL fragment, which the browser never
// sends to a server. Move it into the form, and drop it from the address bar and history. The
// form is not submitted: a link from anywhere could carry another tenant's key, so signing in
// (and switching tenant) is always the user's own click.
(function () {
  var match = /[#&]key=([^&]+)/.exec(location.hash);
  if (!match) return;
  history.replaceState(null, "", location.pathname);
  document.getElementById("key").value = decodeURIComponent(match[1]);
  var note = document.getElementById("from-link");
  if (note) note.hidden = false;
  document.getElementById("sign-in").focus();
})();
