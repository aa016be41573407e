"""The dashboard's static files (index.html, app.js, style.css), served at /ui by
jobq.api.routes.ui. A package only so that they travel as its package data."""
