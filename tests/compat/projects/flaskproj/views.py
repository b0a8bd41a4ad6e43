from .mail import send_mail


def signup(email):
    """The view: store the user (not shown), then mail them in a second, outside the request."""
    send_mail.apply_async(args=[email, "Welcome!", "Thanks for signing up."], countdown=1)
    return {"status": "ok"}
